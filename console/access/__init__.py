"""Access: who may see and do what with which project, the roles, and login throttling."""
