from blackbox_wd.doors.cli import main

main()
