"""Runs: steering a crawl, jobs and their reads, notices and runs in process, workers, beat and control."""
