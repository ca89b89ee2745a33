# train (one job per variant, each alone on the machine) -> evaluate


rule train:
    input:
        PROCESSED,
        CODE + "train.py",
        CODE + "fused.py",
        CODE + "model.py",
    output:
        model="models/{variant}.safetensors",
        metrics="metrics/train/{variant}.json",
        history="plots/train/{variant}.csv",
    params:
        values=param_values("train"),
    log:
        "logs/train_{variant}.log",
    wildcard_constraints:
        variant="|".join(VARIANTS),
    threads: workflow.cores
    shell:
        cli("train --variant {wildcards.variant}")


rule evaluate:
    input:
        "data/processed/test_images.npy",
        "data/processed/test_labels.npy",
        "models/{variant}.safetensors",
        CODE + "evaluate.py",
    output:
        metrics="metrics/evaluate/{variant}.json",
        confusion="plots/confusion/{variant}.csv",
        details="metrics/evaluate/{variant}_details.json",
    params:
        values=param_values("evaluate"),
    log:
        "logs/evaluate_{variant}.log",
    wildcard_constraints:
        variant="|".join(VARIANTS),
    threads: workflow.cores
    shell:
        cli("evaluate --variant {wildcards.variant}")
