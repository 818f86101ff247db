from memloci.cli.main import main

main()
