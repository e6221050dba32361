"""The worker's runtime, shared by every framework's adapter and run in the framework's own
Python: the timed loop (harness), the rank's environment (distenv, rendezvous, environment),
where it runs and in which AMP dtype (accelerator), what the device can run (capability),
its memory cap (memory), data=files (datafiles, pipeline), the synthetic batch (synthetic),
traces on demand (profile), name -> builder tables (choices). The file contract the workers
share with the launchers and the analysis is contract/; the node checks are healthchecks/.
Standard library only, but for synthetic.py and datafiles.py's numpy."""
