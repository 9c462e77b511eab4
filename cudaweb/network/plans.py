"""Which pairs meet in which round: every round holds disjoint pairs, so each node runs one pair test at a time."""


def matrix(count):
    """Every pair of `count` nodes in count-1 rounds (count rounds when odd): the circle method of round robins."""
    order = list(range(count)) + ([None] if count % 2 else [])
    rounds = []
    for _ in range(len(order) - 1):
        half = len(order) // 2
        pairs = [(order[i], order[-1 - i]) for i in range(half)]
        rounds.append([tuple(sorted(p)) for p in pairs if None not in p])
        order = [order[0], order[-1]] + order[1:-1]
    return rounds


def ring(count):
    """Each node with its two neighbours on a ring, in 2 rounds (3 when `count` is odd): O(1) rounds for any size."""
    if count < 2:
        return []
    if count == 2:
        return [[(0, 1)]]
    edges = [(i, (i + 1) % count) for i in range(count)]
    rounds = [edges[0:count - count % 2:2], edges[1:count - count % 2:2]]
    if count % 2:
        rounds.append([edges[-1]])
    return [[tuple(sorted(p)) for p in round_] for round_ in rounds if round_]


def plan_for(count, small=8):
    """The full matrix for small sets, the ring for large ones."""
    return "matrix" if count <= small else "ring"
