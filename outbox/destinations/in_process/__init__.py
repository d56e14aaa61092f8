"""The in_process kind: the receiver's services called directly (`destination`), for the fast tests and the demo."""
