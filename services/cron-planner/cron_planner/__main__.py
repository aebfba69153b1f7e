from cron_planner.main import main

main()
