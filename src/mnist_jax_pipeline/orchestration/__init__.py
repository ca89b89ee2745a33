"""What runs the stages and proves their outputs current, for both orchestrators."""
