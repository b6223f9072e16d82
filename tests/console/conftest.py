"""Fixtures of the console's tests. A test file that defines its own `project` uses its own."""

import pytest

from console.health.monitors import monitors_ensure


@pytest.fixture
def project(make_project):
    """A project with its built-in monitors, as a new project gets them."""
    project = make_project(name="watched")
    monitors_ensure([project.id])
    return project
