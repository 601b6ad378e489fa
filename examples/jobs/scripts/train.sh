#!/usr/bin/env bash
# A stand-in training script for the examples: prints its arguments and GPUs, works a bit.
echo "train.sh $* on GPUs $CUDA_VISIBLE_DEVICES (job $GANTRY_JOB_ID)"
sleep 2
echo "train.sh done"
