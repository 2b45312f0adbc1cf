"""Reciprocal rank fusion of the bi-encoder order and the reranker order."""

from specrag.retrieval.fusion import fuse_orders, rrf


def test_an_item_both_orders_like_wins_and_ties_keep_the_first_order():
    # 0 and 2 tie (1st + 3rd) and beat 1 (2nd + 2nd); the first order breaks the tie
    assert rrf([[0, 1, 2], [2, 1, 0]]) == [0, 2, 1]
    assert rrf([[0, 1, 2, 3], [1, 3, 0, 2]])[0] == 1  # 2nd + 1st beats 1st + 3rd


def test_fuse_orders_uses_the_input_position_as_the_bi_encoder_rank():
    # reranker moves candidate 4 to the top: fused it lands between the two opinions
    fused = fuse_orders([4, 0, 1, 2, 3], n=5)
    assert sorted(fused) == [0, 1, 2, 3, 4]
    assert fused.index(4) < 4 and fused[0] == 0
    assert fuse_orders([0, 1, 2], n=3) == [0, 1, 2]
