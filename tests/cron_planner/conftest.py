from tests.leader_election.conftest import services

__all__ = ["services"]
