"""``python -m waitlab``: the same command line as the ``waitlab`` script."""

from waitlab.entry import main

if __name__ == "__main__":
    raise SystemExit(main())
