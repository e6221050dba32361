#!/bin/bash

# Parameters
#SBATCH --chdir=/work/wt/secrets
#SBATCH --cpus-per-task=1
#SBATCH --gpus-per-node=1
#SBATCH --job-name=dlbench-000-pytorch-resnet50-fp32-1x1-bs4
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=/tmp/oldsweep/slurm-2026-12-01/slurm/%j_0_log.out
#SBATCH --partition=debug
#SBATCH --requeue
#SBATCH --signal=B:USR2@120
#SBATCH --time=8
#SBATCH --wckey=submitit

# command
export SUBMITIT_EXECUTOR=slurm
exec /work/wt/secrets/.venv/bin/python -u -m submitit.core._submit /tmp/oldsweep/slurm-2026-12-01/slurm
