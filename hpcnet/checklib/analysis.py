"""Figures of merit computed from whole tables: the pair matrix's median,
worst pair and outlier nodes."""
from __future__ import annotations

import statistics


def outlier_nodes(rows, hosts: dict, column: str, fraction: float, low_is_bad: bool) -> list:
    '''Nodes whose own median over the pairs they are in is worse than the
    median node by more than ``fraction`` (a node with a slow link makes
    every one of its pairs slow; a slow pair between two good nodes does not
    move either node's median).'''
    per_node = {}
    for row in rows:
        for rank in (int(row['rank_a']), int(row['rank_b'])):
            per_node.setdefault(hosts[rank], []).append(row[column])
    medians = {host: statistics.median(v) for host, v in per_node.items()}
    if len(medians) < 3:
        return []      # with two nodes there is no majority to compare against
    typical = statistics.median(medians.values())
    if low_is_bad:
        return sorted(h for h, m in medians.items() if m < typical * (1 - fraction))
    return sorted(h for h, m in medians.items() if m > typical * (1 + fraction))


def worst_median(values, worst):
    '''(median, worst, worst / median) of per-pair figures; ``worst`` is max
    for latency, min for bandwidth.'''
    median = statistics.median(values)
    w = worst(values)
    return median, w, w / median
