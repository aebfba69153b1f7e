from payment_gateway.main import main

main()
