"""`mnist-pipeline crate`: the workspace's last run as a Workflow Run RO-Crate (Provenance Run Crate 0.5).

records.py reads the provenance records (the project's and every sweep point's) and checks each file
they name against the disk; software.py reads the versions they name; agent.py finds who ran them (the
git user); build.py turns them into the crate with ro-crate-py; validate.py runs roc-validator on it
offline; command.py is the command. Not a stage: no stage imports it.
"""
