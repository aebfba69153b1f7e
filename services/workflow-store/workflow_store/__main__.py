from workflow_store.main import main

main()
