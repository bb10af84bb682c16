"""What training adds around TRL's trainers: the Reasoning Arena (a judge ranks zero-variance
GRPO groups), the per-step progress line, and TinyLoRA quantization for the bound. The
stages that train (train, distill) live in `stages/`."""
