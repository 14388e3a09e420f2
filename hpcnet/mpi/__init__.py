"""hpcnet's MPI families: one registry entry per family (:mod:`.registry`),
with the transport-report parsers the entries name, the entries hpcnet ships
(:mod:`.entries`) and known issues (:mod:`.known_issues`); its registry class
(:class:`Registry`) keeps hpcnet.fabrics' fabrics as well.

A leaf package: it imports nothing of hpcnet outside itself.
"""
from hpcnet.mpi.known_issues import (DONE_OK_LINE, FINALIZE_WATCHDOG_LINE, KERNEL_ERROR_PREFIX,
                                     FailureEvidence, KnownIssue, Phase)
from hpcnet.mpi.registry import (OWN_REPORT, FamilyEntry, Registry, RegistryError, TransportParser,
                                 environment_label, families, family, family_names,
                                 in_probe_order, is_report_variable, known_issue,
                                 known_issue_named, known_issues, library_family,
                                 module_family, mpi_profile, probe_header_chain, register,
                                 spack_family, spack_packages, start_env, toolchains,
                                 transport_parser, transport_parsers, unregister,
                                 wrapper_show_args)
from hpcnet.mpi.entries import MpiFamily

__all__ = ['DONE_OK_LINE', 'FINALIZE_WATCHDOG_LINE', 'KERNEL_ERROR_PREFIX', 'FailureEvidence',
           'KnownIssue', 'Phase', 'OWN_REPORT', 'FamilyEntry', 'Registry', 'RegistryError',
           'TransportParser', 'environment_label', 'families', 'family', 'family_names',
           'in_probe_order', 'is_report_variable', 'known_issue', 'known_issue_named',
           'known_issues', 'library_family', 'module_family', 'mpi_profile', 'probe_header_chain',
           'register', 'spack_family', 'spack_packages', 'start_env', 'toolchains',
           'transport_parser', 'transport_parsers', 'unregister', 'wrapper_show_args', 'MpiFamily']
