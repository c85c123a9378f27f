from exec_daemon.cli import main

main()
