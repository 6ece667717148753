from openprogram.cli.main import main

raise SystemExit(main())
