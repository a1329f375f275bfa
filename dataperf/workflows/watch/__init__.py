"""`dataperf watch`: the step time, data stall and loader settings of the user's own, unmodified training job
(a startup hook injected through PYTHONPATH), and the collectors on its whole process tree."""
