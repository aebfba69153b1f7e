from dispatcher.main import main

main()
