"""``python -m nclab``: the ``nclab`` command."""

from nclab.cli import main

if __name__ == "__main__":
    main()
