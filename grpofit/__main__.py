try:
    from grpofit.cli import main
except KeyboardInterrupt:  # Ctrl-C before the command line's own handlers: one line, exit 130
    import sys

    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

main()
