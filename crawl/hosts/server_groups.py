"""The budget each (server, project) of a claim books on: the server's own, or, when the project
groups servers (Project.politeness_group), the one its address or registrable domain names. One
lookup per host name, cached in the process (core.net.addresses), never one per page."""

from core.net.addresses import addresses_of
from core.servers import GROUP_IP, group_key, server_parts
from crawl.models import Project


def budgets_of(keys, projects: dict[int, Project]) -> dict[tuple[str, int], str]:
    """{(server, project id): the server whose Host row holds its slots and connections}."""
    modes = {key: projects[key[1]].politeness_group for key in keys}
    names = {server_parts(server)[0] for (server, _), mode in modes.items() if mode == GROUP_IP}
    addresses = addresses_of(names) if names else {}
    return {
        (server, project_id): group_key(server, mode, addresses.get(server_parts(server)[0]))
        for (server, project_id), mode in modes.items()
    }
