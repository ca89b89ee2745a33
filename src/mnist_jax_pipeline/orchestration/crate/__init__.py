"""`mnist-pipeline crate`: the workspace's last run as a Workflow Run RO-Crate (Provenance Run Crate 0.5).

records.py reads the provenance records (the project's and every sweep point's) and checks each file
they name against the disk; build.py turns them, the versions they name and the git user into the crate
with ro-crate-py; validate.py runs roc-validator on it offline; command.py is the command.
"""
