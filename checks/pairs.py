"""Per-pair matrix (src/pairs.c): latency and bandwidth of every pair of
ranks, scheduled in rounds of disjoint pairs (N ranks: N-1 rounds), so that
one bad link or node stands out instead of hiding in an average.

Scale ``all_nodes``: one rank on each node of a multi-node partition available
when it starts (hpcnet.checklib.flexnodes).  Each
pair reports its mean latency, the mean and median of its bandwidth samples,
its first exchange (what a connection costs to set up) and its jitter
(standard deviation).  Bandwidth is judged on the median sample: a stall
slows a few samples of a healthy pair, and the median holds against them.

Judging, retest before blame: the kernel calls a pair an outlier by one of
two rules, measures the outlier pairs again, twice, with a control pair for
each of their nodes, and only a pair that is an outlier in the first pass and
again at its better second-pass measurement is bad (``outlier_rule``):

- ``mad``: one-sided median + k x MAD over the pairs (latency above, bandwidth
  below; a pair faster than the rest is no fault), MAD scaled to a standard
  deviation as ``scipy.stats.median_abs_deviation(scale='normal')``.
  ``MAD_K`` = 3: a bad node's pairs are 2/N of all pairs (a quarter on 8
  nodes) and widen the MAD with them, so that k = 4 can put the bound among
  the slowed node's own pairs and leave the node unnamed (docs/measurements.md,
  "Finding the bad node or link").  A
  first-pass outlier only costs its retests, so k can sit below Intel
  Cluster Checker's 6 (two-sided, no retest); what keeps healthy pairs from
  blame is the second pass, two measurements at two moments, both beyond
  the bound: for Gaussian noise a pair passes 3 one-sided with p = 1.35e-3,
  all three times with p = 2.5e-9, so on 1024 nodes (523,776 pairs) about
  700 healthy pairs are retested (a few rounds of disjoint pairs) and 1e-3
  are reported bad per run.  ``OUTLIER_FLOOR`` = 10 % of the
  median: where the pairs are all alike the MAD is near 0 and k x MAD would
  call a 1 % wobble a fault; a fault worth a visit to the rack costs more
  than a tenth of a pair's rate (ClusterKit's own bandwidth margin is 7 %).
- ``clusterkit``: NVIDIA ClusterKit's ratios to the best pair: latency above
  2.1 x the least, bandwidth below ``bw_of_best`` of the greatest: ClusterKit's
  93 %, or ``SHARED_CORES_BW_OF_BEST`` where the partition's nodes share the
  host's cores, whose stalls move a healthy pair's bandwidth by up to a fifth
  (docs/measurements.md, "`make testbed-run` from a fresh clone on a slower day").
- ``auto`` (default): ``mad`` from ``MAD_RULE_MIN_NODES`` nodes, ``clusterkit``
  below.  The median pair is a healthy one only while the slow pairs are
  fewer than half; a bad node slows 2 of every N pairs, half of them on 4
  nodes and most on 3, where only the best pair is a healthy reference.

Attribution (hpcnet.checklib.analysis.culprits): a node when more than half
of its pairs are bad, a link when that pair is the only bad pair of both its
nodes, "inconclusive" otherwise; counted per quantity.

Scale (hpcnet.checklib.pairschedule): the pairs of a round run at once
(``pair_order`` concurrent, as on a real cluster) or take turns (``turns``,
where a partition's nodes share the host's cores); ``auto`` (default) takes
the partition's ``nodes_share_cores``.  ``sample_rounds`` > 0 measures a
random sample of that many rounds (drawn with ``sample_seed``, or a seed
drawn and recorded), which gives every node two pairs at least, for clusters too large for all
pairs nightly.  The schedule (rounds, pairs, order, and the expected time
from a stated ``pair_seconds``) is logged before the run, kept in the
report's ``schedule`` with what the run took, and printed by the kernel
first in the job output, with the time its first round took and the time
that predicts.

Switch tree (the partition's ``extras.topology``, hpcnet.topology): the
rounds are the tree's (hpcnet.checklib.treeschedule: leaf-local rounds apart
from cross-leaf ones, no leaf's uplinks carrying more concurrent pairs than
their capacity, every pair once), handed to the kernel as host pairs
(``--pair-rounds``); ``rounds`` and ``rounds_without_tree`` say what that
cost.  Attribution then names an uplink first: a leaf most of whose
cross-leaf pairs are bad (hpcnet.checklib.analysis.culprits), counted as
``<quantity>_outlier_uplinks``.  Without a tree nothing of this changes.

A pair needs two nodes: on one node (scale ``1_node``) the check does not
run and says why.  Two nodes are one pair: it is reported, but neither the
rule (one pair is its own median and best) nor attribution can judge it; the
check says that attribution needs three nodes.
"""

import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import ReframeError, SanityError

from hpcnet.checklib import analysis, pairschedule, sanity, treeschedule
from hpcnet.checklib.analysis import NODES_FOR_ATTRIBUTION, QUANTITY_PREFIX, worst_median
from hpcnet.constants import Feature, Scale
from hpcnet.fabrics import ConfigError
from hpcnet.checklib.testlib import KernelRun

#: Nodes that make a pair.
NODES_FOR_A_PAIR = 2
#: The outlier rules (module docstring) and their constants.
OUTLIER_RULES = ('auto', 'mad', 'clusterkit')
MAD_K = 3.0
OUTLIER_FLOOR = 0.10
MAD_RULE_MIN_NODES = 5
CLUSTERKIT_BW_OF_BEST = 0.93
SHARED_CORES_BW_OF_BEST = 0.75
PAIR_ORDERS = ('auto', pairschedule.CONCURRENT, pairschedule.TURNS)
#: Each quantity's column of the pair table, and which end of it is worst.
SUMMARY_OF = {'latency': ('lat_mean_us', max), 'bandwidth': ('bw_median_MBps', min)}
#: The summaries of analysis.worst_median, in its order.
SUMMARIES = ('median_pair', 'worst_pair', 'worst_over_median')
#: What two nodes cannot tell: the pair is the median and the worst pair.
ATTRIBUTION_VARIABLES = tuple(f'{quantity}_{what}' for quantity in QUANTITY_PREFIX
                              for what in ('worst_pair', 'worst_over_median'))
#: The culprits counted from three nodes on, per quantity: performance
#: variable suffix -> the Culprits field counted.
CULPRIT_COUNTS = {'outlier_nodes': 'nodes', 'outlier_links': 'links',
                  'inconclusive_pairs': 'inconclusive'}
#: Counted where the partition has a switch tree.
UPLINK_COUNT = {'outlier_uplinks': 'uplinks'}
#: The tree's rounds as the kernel reads them (--pair-rounds), in the stage
#: directory.
PAIR_ROUNDS_FILE = 'pair-rounds.txt'


@rfm.simple_test
class hpcnet_pairs(KernelRun):
    scale = parameter(Scale.WHOLE_PARTITION)
    reference_index = ['$partition', 'mpi_family']
    #: Message sizes (bytes) of the latency and bandwidth ping-pongs.
    lat_size = variable(int, value=8)
    #: 4 MiB: where a ping-pong reaches the wire rate (the Rocks paper, Table II).
    bw_size = variable(int, value=4 * 1024 * 1024)
    #: Samples per pair (the first is kept out of the statistics).
    samples = variable(int, value=200)
    bw_samples = variable(int, value=10)
    #: Which pairs are outliers: one of OUTLIER_RULES (module docstring).
    outlier_rule = variable(typ.Str['|'.join(OUTLIER_RULES)], value='auto')
    #: The mad rule's k and its floor (a fraction of the median).
    mad_k = variable(float, value=MAD_K)
    outlier_floor = variable(float, value=OUTLIER_FLOOR)
    #: The clusterkit rule's bandwidth bound, a fraction of the best pair's
    #: (None: by the partition, module docstring).
    bw_of_best = variable(float, type(None), value=None)
    #: The pairs of a round at once or in turns: one of PAIR_ORDERS.
    pair_order = variable(typ.Str['|'.join(PAIR_ORDERS)], value='auto')
    #: Rounds of a random sample (0: every round), and its seed (None: drawn).
    sample_rounds = variable(int, value=0)
    sample_seed = variable(int, type(None), value=None)
    #: Seconds one pair takes, stated (e.g. a previous run's), for the
    #: expected time printed before the run.
    pair_seconds = variable(float, type(None), value=None)
    #: What was planned and what the run took (pairschedule.Schedule.as_dict,
    #: first_pass_seconds, retested, retest_rounds).
    schedule = variable(typ.Dict[str, object], value={}, loggable=True)
    #: Rounds of the first pass, and what the circle method would take without
    #: the switch tree (equal where the partition has none).
    rounds = variable(int, value=0, loggable=True)
    rounds_without_tree = variable(int, value=0, loggable=True)
    #: Each measured host's leaf switch, where the partition has a tree (the
    #: report orders its heat map by leaf).
    switch_leaves = variable(typ.Dict[str, str], value={}, loggable=True)
    #: The whole matrix: one dict per pair (JSON report).
    pair_table = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)
    #: By quantity, what the bad pairs blame: {'bandwidth': {'nodes': ['cn3'],
    #: 'links': [['cn1', 'cn2']], 'inconclusive': []}, 'latency': {...}}.
    culprits = variable(analysis.CULPRITS_TYPE, value={}, loggable=True)
    #: The verdict in words: the rule and what it blamed, or why nothing can be.
    attribution = variable(str, value='', loggable=True)
    tags = {'pairs', 'mpi'}
    valid_prog_environs = [f'+{Feature.MPI} +{Feature.PRIMARY}']
    kernel_name = 'pairs'

    def rule_in_force(self) -> str:
        '''The rule the kernel applies: none on two nodes (nothing to judge
        one pair against), ``auto`` resolved by the node count.'''
        if self.num_nodes < NODES_FOR_ATTRIBUTION:
            return 'none'
        if self.outlier_rule == 'auto':
            return 'mad' if self.num_nodes >= MAD_RULE_MIN_NODES else 'clusterkit'
        return self.outlier_rule

    def kernel_args(self) -> list:
        self.descr = f'Per-pair MPI latency/bandwidth over {self.current_partition.fullname}'
        planned = self.planned()
        turns = ['--one-pair-at-a-time'] if planned.order == pairschedule.TURNS else []
        sample = ['--rounds', ','.join(map(str, planned.rounds))] if planned.seed is not None else []
        stated = ['--pair-seconds', str(self.pair_seconds)] if self.pair_seconds else []
        if planned.tree_rounds:
            sample = ['--pair-rounds', PAIR_ROUNDS_FILE]
        rule = self.rule_in_force()
        rule_options = {'mad': ['--mad-k', str(self.mad_k), '--outlier-floor', str(self.outlier_floor)],
                        'clusterkit': ['--bw-of-best', str(self.bandwidth_of_best())]}.get(rule, [])
        return ['--lat-size', str(self.lat_size), '--bw-size', str(self.bw_size),
                '--samples', str(self.samples), '--bw-samples', str(self.bw_samples),
                '--outlier-rule', rule] + rule_options + turns + sample + stated

    def bandwidth_of_best(self) -> float:
        if self.bw_of_best is not None:
            return self.bw_of_best
        return (SHARED_CORES_BW_OF_BEST if self.partition.nodes_share_cores
                else CLUSTERKIT_BW_OF_BEST)

    def planned(self) -> pairschedule.Schedule:
        '''The schedule, planned once (a drawn seed is then the run's).'''
        if not self.schedule:
            # Where the nodes share one host's cores, concurrent pairs would
            # measure CPU contention: the pairs of a round then take turns.
            order = self.pair_order if self.pair_order != 'auto' else (
                pairschedule.TURNS if self.partition.nodes_share_cores else pairschedule.CONCURRENT)
            tree = self.partition.topology
            try:
                planned = pairschedule.plan(
                    self.num_nodes, order, self.sample_rounds, self.sample_seed,
                    self.pair_seconds, treeschedule.round_count(tree) if tree else 0,
                    tree.source if tree else None)
            except pairschedule.ScheduleError as err:
                raise ReframeError(f'{self.display_name}: {err}') from None
            self.schedule = planned.as_dict()
            self.rounds = len(planned.rounds)
            self.rounds_without_tree = pairschedule.round_count(self.num_nodes)
        s = self.schedule
        return pairschedule.Schedule(s['nodes'], s['order'], tuple(s['rounds']), s['seed'],
                                     s['pair_seconds'], s['tree_rounds'], s['tree'])

    @run_before('run')
    def write_pair_rounds(self):
        '''The switch tree's rounds, as host pairs, for the kernel.'''
        tree = self.partition.topology
        if tree is not None:
            treeschedule.write_rounds(treeschedule.tree_rounds(tree),
                                      os.path.join(self.stagedir, PAIR_ROUNDS_FILE), tree)

    @run_before('run')
    def log_schedule(self):
        self.logger.info(f'{self.display_name} on {self.current_partition.fullname}: '
                         f'{self.planned().describe()}')

    @run_after('setup')
    def needs_pairs_of_nodes(self):
        if self.num_nodes < NODES_FOR_A_PAIR:
            self.skip_because(f'the pair matrix needs at least {NODES_FOR_A_PAIR} nodes; '
                              f'{self.current_partition.fullname} runs it on {self.num_nodes} '
                              '(ranks of one node measure the node, not a link)')
        if self.num_nodes < NODES_FOR_ATTRIBUTION:
            self.attribution = (f'not computed: {self.num_nodes} nodes are one pair, reported as '
                                f'measured; putting a slow pair on a node or a link needs at '
                                f'least {NODES_FOR_ATTRIBUTION} nodes')
            for name in ATTRIBUTION_VARIABLES:
                self.perf_variables.pop(name, None)

    def _summary(self, column, worst):
        return worst_median([r[column] for r in self.kernel_output('pairs').rows], worst)

    @run_after('init')
    def set_perf_variables(self):
        for quantity, (column, worst) in SUMMARY_OF.items():
            for position, what in enumerate(SUMMARIES):
                name = self.add_metric(f'{quantity}_{what}',
                                       self._summary_at(column, worst, position))
                # Where the nodes share the host's cores, the pairs' bandwidth
                # is judged over iperf3 between the job's first two nodes
                # (hpcnet.checklib.calibration): absolute MB/s there is the host's limit.
                if self.metric(name).judged_over:
                    self.calibrated_metrics.append(name)

    @sn.deferrable
    def _summary_at(self, column, worst, position):
        return self._summary(column, worst)[position]

    def _culprits(self, quantity):
        try:
            return analysis.culprits(self.kernel_output('pairs').rows, quantity,
                                     self.partition.topology)
        except ConfigError as err:
            raise SanityError(str(err)) from None

    @run_after('setup')
    def count_culprits(self):
        # Counted apart per quantity: on an emulated cluster latency is the
        # host's, and a site may judge one and not the other.
        if self.num_nodes < NODES_FOR_ATTRIBUTION:
            return
        counts = dict(CULPRIT_COUNTS, **(UPLINK_COUNT if self.partition.topology else {}))
        for quantity in QUANTITY_PREFIX:
            for suffix, kind in counts.items():
                self.add_metric(f'{quantity}_{suffix}', self._culprit_count(quantity, kind))

    @sn.deferrable
    def _culprit_count(self, quantity, kind):
        return len(getattr(self._culprits(quantity), kind))

    @sanity_function
    def assert_valid(self):
        out = self.kernel_output('pairs')
        expected = self.planned().pairs
        if len(out.rows) != expected:
            raise SanityError(f'{len(out.rows)} pairs measured, the schedule has {expected}')
        if out.header.get('outlier-rule') != self.rule_in_force():
            raise SanityError(f"the kernel applied outlier rule {out.header.get('outlier-rule')!r}, "
                              f'the check asked for {self.rule_in_force()!r}')
        if self.rule_in_force() == 'clusterkit' and \
                out.header_float('bw-of-best') != self.bandwidth_of_best():
            raise SanityError(f"the kernel judged bandwidth below {out.header.get('bw-of-best')} of "
                              f'the best pair, the check asked for {self.bandwidth_of_best()}')
        with sanity.sanity_from_output_errors():
            out.require_finite_positive(('lat_first_us', 'lat_mean_us', 'lat_min_us', 'lat_max_us',
                                         'bw_mean_MBps', 'bw_median_MBps', 'bw_min_MBps', 'bw_max_MBps'),
                                        what='pair')
        self.prove(out.mpi_library, out.hosts, sanity.bytes_sent_by_host(out))
        self.pair_table = [dict(r) for r in out.rows]
        tree = self.partition.topology
        if tree is not None:
            self.switch_leaves = {h: tree.leaf_of[h] for r in out.rows
                                  for h in (r['host_a'], r['host_b']) if h in tree.leaf_of}
        first_pass = out.header_float('first-pass-seconds')
        self.schedule = dict(self.schedule, first_pass_seconds=first_pass,
                             measured_pair_seconds=self.planned().measured_pair_seconds(first_pass),
                             retested=int(out.header.get('retested', 0)),
                             retest_rounds=int(out.header.get('retest-rounds', 0)))
        if self.num_nodes >= NODES_FOR_ATTRIBUTION:
            found = {q: self._culprits(q) for q in QUANTITY_PREFIX}
            self.culprits = {q: c.as_dict() for q, c in found.items()}
            self.attribution = (f'rule {self.rule_in_force()}, {out.header["retested"]} pairs '
                                'measured again, twice; bad in both passes: '
                                + '; '.join(f'{q}: {c.describe()}' for q, c in found.items()))
        return True
