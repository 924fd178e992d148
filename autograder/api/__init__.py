"""What the test cells and the checks are written with: items, input specs, scripted objects, options."""
