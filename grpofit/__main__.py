from grpofit.cli import main

main()
