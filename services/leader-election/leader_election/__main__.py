from leader_election.main import main

main()
