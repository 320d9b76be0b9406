"""What is optimised: the task spec and its loading, size/launch expressions, candidates, the include guard, the tunable space."""
