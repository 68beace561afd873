"""``torchrun`` target for tests/test_ddp.py: ``train CONFIG OUT EPOCH``, rank 1 exiting abruptly (``os._exit``,
no clean-up, as a killed process) right after epoch ``EPOCH``."""

import os
import sys

from nclab.train.config import load_config
from nclab.train.trainer import train


def main() -> None:
    config, out, kill_after = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def die(epoch: int) -> None:
        if epoch == kill_after and os.environ["RANK"] == "1":
            os._exit(3)

    train(load_config(config, []), out, progress=False, on_epoch_end=die)


if __name__ == "__main__":
    main()
