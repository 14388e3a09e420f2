"""A baseline put into an existing reference file (merge): only what it
measured is replaced, a site's own decisions stand, and the provenance keeps
the earlier blocks for the cases still theirs; and what writing the result
would change (diff).
"""
from __future__ import annotations

import difflib
import re

from hpcnet.acceptance.references.baseline import ONE_SIDED_REASON, site_not_asserted
from hpcnet.acceptance.references.references import (NOT_ASSERTED, PROVENANCE, UNBOUNDED,
                                                     written_by_baseline)

_SPECIAL = (PROVENANCE, NOT_ASSERTED, UNBOUNDED)


def _leaves(node: dict, depth: int, keys: tuple = ()):
    """(index keys, variable, reference) of a test's entries, ``depth`` index levels."""
    if depth == 0:
        for var, ref in node.items():
            yield keys, var, ref
        return
    for k, sub in node.items():
        if isinstance(sub, dict):
            yield from _leaves(sub, depth - 1, (*keys, k))


def _depth(node: dict) -> int:
    return len(node['$index']) if '$index' in node else 1


def _put(node: dict, keys: tuple, var: str, ref) -> None:
    for k in keys:
        node = node.setdefault(k, {})
    node[var] = ref


def _unliteral(pattern: str) -> str:
    """The path a _literal() pattern matches."""
    return re.sub(r'\\(.)', r'\1', str(pattern))



def merge(existing: dict, new: dict) -> dict:
    """``new`` (a document()) put into ``existing`` (a reference file as
    loaded): the entries (metrics) ``new`` measured are replaced, every other one is
    kept: other tests, other partitions and environments, their
    `$not_asserted` entries, and a site's own `$not_asserted` reasons for
    the measured ones (a site's decision stands; a baseline's own spread
    reasons are renewed).  A test whose ``$index`` differs is replaced
    wholly.  The provenance is the new block, with what was kept and
    replaced, and the earlier blocks under 'earlier', each listing only the
    cases whose entries still come from it."""
    if not existing:
        return new
    if not new:
        return existing
    prov = dict(new.get(PROVENANCE) or {})
    updated = prov.get('updated') or {}
    old_na = existing.get(NOT_ASSERTED) or {}
    new_na = new.get(NOT_ASSERTED) or {}
    site_declared = site_not_asserted(existing)
    out: dict = {PROVENANCE: prov}
    not_asserted: dict = {}
    unbounded = _merge_unbounded(existing.get(UNBOUNDED) or {}, new.get(UNBOUNDED) or {},
                                 updated, existing)
    kept: dict = {}
    replaced: dict = {}
    for test in _tests(existing, new, updated, old_na):
        old = existing.get(test)
        if test not in updated:
            if old is not None:
                out[test] = old
                kept[test] = 'all entries'
            if test in old_na:
                not_asserted[test] = dict(old_na[test])
            continue
        site_na = site_declared.get(test) or {}
        if '$index' in (old_na.get(test) or {}):
            site_na = {'$index': old_na[test]['$index'], **site_na}
        index = updated[test]['$index']
        if old is not None and list(old.get('$index') or ['$partition']) != list(index):
            replaced[test] = (f"$index {old.get('$index') or '[$partition]'} -> {index}: every "
                              f"entry of the test is this baseline's")
            old = None
        merged, na, n_kept = _merge_test(old, new.get(test), index, old_na.get(test) or {},
                                         new_na.get(test) or {}, site_na)
        if n_kept:
            kept[test] = f'{n_kept} entries'
        if len(merged) > ('$index' in merged):
            out[test] = merged
        if na:
            not_asserted[test] = na
    _add_history(prov, kept, replaced, _earlier(existing.get(PROVENANCE), updated, replaced))
    if not_asserted:
        out[NOT_ASSERTED] = not_asserted
    if unbounded:
        out[UNBOUNDED] = unbounded
    return out


def _tests(existing: dict, new: dict, updated: dict, old_na: dict) -> list:
    """Every test of a merge, in the existing file's order, then the new ones."""
    tests = [t for t in existing if t not in _SPECIAL]
    tests += [t for t in new if t not in _SPECIAL and t not in tests]
    return tests + [t for t in (*updated, *old_na) if t not in tests]


def _merge_test(old: dict | None, nw: dict | None, index: list, old_na: dict, new_na: dict,
                site_na: dict) -> tuple:
    """(entries, `$not_asserted` entries, how many old entries were kept) of
    one test the new baseline measured: ``old``'s entries it did not measure
    (None: none kept), then its own; a site's `$not_asserted` reasons
    (``site_na``) stand over the baseline's."""
    na = dict(site_na)
    new_entries = {'/'.join(map(str, (*keys, var))) for keys, var, _ in _leaves(
        {k: v for k, v in (nw or {}).items() if k != '$index'}, len(index))}
    new_entries |= {_unliteral(p) for p in new_na}
    n_kept = 0
    if old is not None:
        merged = {'$index': list(index)} if '$index' in old else {}
        for keys, var, ref in _leaves({k: v for k, v in old.items() if k != '$index'},
                                      _depth(old)):
            if '/'.join(map(str, (*keys, var))) not in new_entries:
                _put(merged, keys, var, ref)
                n_kept += 1
        for p, r in old_na.items():
            if written_by_baseline(r) and _unliteral(p) not in new_entries:
                na[p] = r
    else:
        merged = {'$index': list(index)}
    for keys, var, ref in _leaves({k: v for k, v in (nw or {}).items() if k != '$index'},
                                  len(index)):
        _put(merged, keys, var, ref)
    for p, r in new_na.items():
        if not any(re.fullmatch(sp, _unliteral(p)) for sp in site_na):
            na[p] = r
    return merged, na, n_kept


def _add_history(prov: dict, kept: dict, replaced: dict, earlier: list) -> None:
    """The merge's record in the new provenance block: what was kept, what
    replaced wholly, and the earlier blocks."""
    if kept:
        prov['kept'] = kept
    if replaced:
        prov['replaced'] = replaced
    if earlier:
        prov['earlier'] = earlier


def _merge_unbounded(old: dict, new: dict, updated: dict, existing: dict) -> dict:
    """The `$unbounded` section after a merge: a site's own reasons kept; a
    baseline's kept for the cases it did not measure again (all of them
    where the test's $index changed are gone); the new baseline's added."""
    out: dict = {}
    for test in [*old, *(t for t in new if t not in old)]:
        keep = {}
        info = updated.get(test)
        index_changed = info is not None and list(
            (existing.get(test) or {}).get('$index') or ['$partition']) != list(info['$index'])
        measured = set((info or {}).get('cases') or [])
        for pattern, reason in (old.get(test) or {}).items():
            if str(reason) != ONE_SIDED_REASON:
                keep[pattern] = reason
            elif not index_changed and _unliteral(pattern).removesuffix('/.*') not in measured:
                keep[pattern] = reason
        keep.update(new.get(test) or {})
        if keep:
            out[test] = keep
    return out


def _earlier(old: dict | None, updated: dict, replaced: dict) -> list:
    """The provenance blocks of ``old`` (a block and its 'earlier' list),
    without the cases now updated; a block with none left is dropped."""
    if not isinstance(old, dict):
        return []
    blocks = [{k: v for k, v in old.items() if k != 'earlier'}, *(old.get('earlier') or [])]
    out = []
    for block in blocks:
        if 'updated' not in block:          # written by hand or before per-case provenance
            out.append(block)
            continue
        left = {}
        for test, info in block['updated'].items():
            if test in replaced:
                continue
            now = set((updated.get(test) or {}).get('cases') or [])
            cases = [c for c in info.get('cases', []) if c not in now]
            if cases:
                left[test] = {**info, 'cases': cases}
        if left:
            out.append({**block, 'updated': left})
    return out


def diff(old_text: str, new_text: str, path: str) -> str:
    """What writing ``new_text`` over ``path`` would change, ignoring the
    provenance block (it always changes)."""
    def body(text):
        lines, skipping = [], False
        for line in text.splitlines(keepends=True):
            if line.startswith(PROVENANCE + ':'):
                skipping = True
                continue
            if skipping and (line.startswith(' ') or not line.strip()):
                continue
            skipping = False
            lines.append(line)
        return lines
    return ''.join(difflib.unified_diff(body(old_text), body(new_text), f'{path} (now)',
                                        f'{path} (baseline)'))
