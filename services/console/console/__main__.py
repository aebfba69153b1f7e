from console.main import main

main()
