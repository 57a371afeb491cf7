"""Generating what students get from the reference solution: scaffold, starters, build."""
