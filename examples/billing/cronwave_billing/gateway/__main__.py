from cronwave_billing.gateway.main import main

main()
