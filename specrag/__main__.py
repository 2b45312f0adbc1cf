"""``python -m specrag`` runs the command line."""

from specrag.cli.main import main

raise SystemExit(main())
