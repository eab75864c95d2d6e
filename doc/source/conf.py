# Sphinx configuration: the operator and contributor docs, with the API
# reference generated from the package's docstrings (sphinxcontrib-apidoc,
# as OpenStack projects do) and the release notes from reno.

import os
import sys

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

sys.path.insert(0, os.path.abspath('../..'))
sys.path.insert(0, os.path.abspath('../../tools'))
import release as release_tool  # noqa: E402

project = 'nova-adaptive-paging'
copyright = 'nova-adaptive-paging developers'
# The release these docs describe, in every page's title: setup.cfg's
# version, which tox -e release builds and checks the docs' pins against.
version = release = release_tool.version()

extensions = [
    'sphinx.ext.autodoc',
    'sphinxcontrib.apidoc',
    'reno.sphinxext',
]

# API reference: every module of the package but the commands (thin
# wrappers, documented by --help) and the simulated host's FUSE layer.
apidoc_module_dir = '../../nova_adaptive_paging'
apidoc_output_dir = 'reference/api'
# watcher/: Watcher's options and Nova's share names in oslo.config's
# global CONF, so one process cannot import both (doc/source/stock-fleet.rst
# documents the strategy).
apidoc_excluded_paths = ['cmd', 'watcher']
apidoc_separate_modules = True
apidoc_toc_file = False
autodoc_default_options = {'members': True, 'show-inheritance': True}
autodoc_member_order = 'bysource'

master_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []
nitpicky = False


# reno names the notes of a history without a release tag after its
# scanner's starting point, "0.0.0": they are the notes of the release
# being made.  Before the table of contents reads the title.
RENO_UNTAGGED = '0.0.0'


def _title_untagged_notes(app, doctree):
    for title in list(doctree.findall(nodes.title)):
        if title.astext() == RENO_UNTAGGED:
            title.children = [nodes.Text(release)]


class Runbooks(Directive):
    """``.. nova-paging-runbooks::``: a section per alert, from the code
    that generates the alerts (nova_adaptive_paging/telemetry/alerts.py),
    with the shipped configuration, so each alert's runbook_url finds its
    section."""

    def run(self):
        from nova_adaptive_paging.telemetry import alerts
        from nova_adaptive_paging.telemetry import rules
        from nova_adaptive_paging.pools import planner
        config = rules.Config(
            pool_cooldown_s=int(planner.Params().cooldown_s))
        text = StringList(alerts.runbooks_rst(config).splitlines(),
                          'nova_adaptive_paging/telemetry/alerts.py')
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, text, node)
        return node.children


def setup(app):
    app.connect('doctree-read', _title_untagged_notes, priority=100)
    app.add_directive('nova-paging-runbooks', Runbooks)
