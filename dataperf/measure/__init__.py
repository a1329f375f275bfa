"""What is measured, one thing a module: a loader trial, the model step, a fed loop, the page cache, collectors,
memory, ceilings. Imports data, backends, results and verdict; never a workflow."""
