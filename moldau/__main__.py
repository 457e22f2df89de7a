from moldau.cli.main import main

raise SystemExit(main())
