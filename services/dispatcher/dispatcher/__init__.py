"""The dispatcher: receives start requests, has the workflow-store record each run
(de-duplicated per schedule and fire time) and routes new runs to their queue."""
