"""A run judged over iperf3 on its own link (hpcnet.checklib.calibration):
where a partition's nodes share the host's cores, each of its
``calibrated_metrics`` gets a ``<name>_over_iperf3``, a path shaped below the
declared rate fails the case, and a busy host withholds its measurement."""
from __future__ import annotations

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, variable
from reframe.core.exceptions import PerformanceError

from hpcnet.checklib import calibration
from hpcnet import metrics
from hpcnet.fabrics import tcp_payload_MBps
from hpcnet.parsers import parsed_once


class JudgedOverIperf3(rfm.RegressionTestPlugin):
    '''The calibration of a NetworkRun (which sets ``partition`` and
    ``num_nodes`` at setup).'''

    #: Performance variables (MB/s) judged against iperf3 on the same link
    #: where the partition's nodes share the host's cores
    #: (hpcnet.checklib.calibration): each gets a ``<name>_over_iperf3``.
    calibrated_metrics = variable(typ.List[str], value=[])
    #: iperf3 before and after the run, the shapers and the host's load before each.
    link_calibration = variable(typ.Dict[str, object], value={}, loggable=True)

    def calibrates_link(self) -> bool:
        '''Whether this case is judged against iperf3 on its own link: nodes
        of an emulated cluster (iperf3 between the job's first two), and
        metrics to calibrate.'''
        return bool(self.calibrated_metrics and self.partition.nodes_share_cores
                     and self.num_nodes >= 2 and self.partition.iface
                     and self.partition.link_rate_bps)

    @run_after('setup', always_last=True)
    def add_calibrated_metrics(self):
        if not self.calibrates_link():
            return
        if metrics.lookup(type(self).__name__, metrics.LINK_OVER_WIRE) is None:
            raise metrics.CatalogueError(
                f'{type(self).__name__} calibrates its link, whose {metrics.LINK_OVER_WIRE} '
                'compare judges, but the metric catalogue has no entry of it (hpcnet.metrics: '
                '_CALIBRATED_TESTS)')
        for name in self.calibrated_metrics:
            if name in self.perf_variables:
                # The ratio's entry: the catalogue holds it beside the metric's.
                ratio = metrics.lookup(type(self).__name__, name + metrics.CALIBRATED_SUFFIX)
                if ratio is None or not ratio.ratio:
                    raise metrics.CatalogueError(
                        f'{type(self).__name__} calibrates {name}, whose ratio over iperf3 is '
                        'not in the metric catalogue (hpcnet.metrics: judged_over)')
                self.perf_variables[name + metrics.CALIBRATED_SUFFIX] = \
                    sn.make_performance_function(self._over_iperf3(self.perf_variables[name]),
                                                 ratio.unit)

    @sn.deferrable
    def _over_iperf3(self, value):
        return self.calibration().ratio(value)

    @parsed_once
    def calibration(self) -> calibration.Calibration:
        try:
            found = calibration.read(self.stagedir)
        except calibration.CalibrationError as err:
            raise PerformanceError(f'link calibration: {err}') from None
        self.link_calibration = {'iperf3_before_MBps': found.before_MBps,
                                 'iperf3_after_MBps': found.after_MBps,
                                 'shaped_bps': found.shaped_bps,
                                 'shaped_by': found.shaped_by,
                                 'host_load': {phase: load and load.describe() for phase, load
                                               in found.host_load.items()}}
        if found.again_MBps is not None:
            self.link_calibration['iperf3_again_MBps'] = found.again_MBps
        part = self.partition
        if part.wire_efficiency is not None:
            self.link_calibration[metrics.LINK_OVER_WIRE] = (
                found.link_MBps / tcp_payload_MBps(part.link_rate_bps, part.mtu))
            if found.host_busy() is False:
                # On a busy host a slow link cannot be told from the host.
                self.link_calibration[metrics.LINK_BELOW_WIRE] = int(found.slow_link(
                    part.iface, part.link_rate_bps, part.mtu, part.wire_efficiency) is not None)
        limited = found.host_limited_note(self.partition.link_rate_bps, self.partition.mtu,
                                          self.partition.wire_efficiency)
        if limited:
            self.link_calibration['judged_against'] = limited
        return found

    def withheld_judgement(self) -> str | None:
        if not self.calibrates_link():
            return None
        found = self.calibration()
        part = self.partition
        slow = found.slow_link(part.iface, part.link_rate_bps, part.mtu, part.wire_efficiency)
        if slow:
            raise PerformanceError(slow)
        return (found.unproven_shaper(part.iface, part.link_rate_bps, part.mtu,
                                      part.wire_efficiency)
                or found.withheld(part.link_rate_bps, part.mtu, part.wire_efficiency))
