from blackbox_wd.cli import main

main()
