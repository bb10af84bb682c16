"""What training adds around TRL's trainers: the Reasoning Arena (a judge ranks zero-variance
GRPO groups), the per-step progress line, TinyLoRA quantization for the bound, and TRL's
LM head made compact on a CPU (cpu_head). The
stages that train (train, distill) live in `stages/`."""
