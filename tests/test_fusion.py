"""Reciprocal rank fusion: bi-encoder with reranker orders, dense with BM25 hits."""

from specrag.retrieval.fusion import MAX_PINNED, fuse_hits, fuse_orders, identifiers, rrf
from specrag.types import Chunk, Hit


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


def _hit(cid: str, score: float, rank: int, text: str = "") -> Hit:
    chunk = Chunk(id=cid, doc_id=cid, source=f"{cid}.txt", text=text or cid, index=0, start=0,
                  end=1, content_hash="", version="v")
    return Hit(chunk=chunk, score=score, rank=rank)


def test_fuse_hits_renumbers_and_keeps_the_cosine_scores():
    dense = [_hit("a", 0.9, 1), _hit("b", 0.8, 2), _hit("c", 0.7, 3)]
    keyword = [_hit("c", 0.7, 1), _hit("x", 0.2, 2)]  # x: only BM25 found it
    fused = fuse_hits(dense, keyword, top_k=4)
    # 3rd + 1st beats 1st alone; b and x are both 2nd once: the dense order breaks the tie
    assert [h.chunk.id for h in fused] == ["c", "a", "b", "x"]
    assert [h.rank for h in fused] == [1, 2, 3, 4]
    assert [h.score for h in fused] == [0.7, 0.9, 0.8, 0.2]
    assert len(fuse_hits(dense, keyword, top_k=2)) == 2
    assert [h.chunk.id for h in fuse_hits(dense, [], top_k=5)] == ["a", "b", "c"]
    assert [h.chunk.id for h in fuse_hits([], keyword, top_k=5)] == ["c", "x"]


def test_identifiers_are_words_with_letters_and_digits():
    q = "Status of ticket ZX-48431 (part SKU4471B, invoice INV-2024-07) since 2024, v2?"
    assert identifiers(q) == ["ZX-48431", "SKU4471B", "INV-2024-07"]
    assert identifiers("What did the board decide in 2024?") == []
    assert identifiers("Who won the 52nd award of the 1990s, the 21ST or U-20?") == ["U-20"]


def test_a_chunk_with_the_questions_identifier_leads_the_fused_list():
    def ticket(cid, n, rank):
        return _hit(cid, 0.9 - rank / 100, rank, f"Ticket ZX-{n}: the laptop flickers.")
    dense = [ticket("a", 48200, 1), ticket("b", 48207, 2), ticket("gold", 48431, 3)]
    keyword = [ticket("b", 48207, 1), ticket("gold", 48431, 2), ticket("a", 48200, 3)]
    plain = fuse_hits(dense, keyword, top_k=3)
    # rank fusion alone: 2nd + 1st wins; gold and a tie (3rd + 2nd, 1st + 3rd), dense first
    assert [h.chunk.id for h in plain] == ["b", "a", "gold"]
    fused = fuse_hits(dense, keyword, top_k=3, question="what about zx-48431?")
    assert [h.chunk.id for h in fused] == ["gold", "b", "a"]
    assert [h.rank for h in fused] == [1, 2, 3] and fused[0].score == plain[2].score
    # a longer id that merely starts with it is another ticket
    assert fuse_hits(dense, keyword, top_k=3, question="ZX-4843")[0].chunk.id == "b"


def test_an_identifier_in_many_chunks_pins_nothing():
    many = [_hit(f"c{i}", 0.9 - i / 100, i + 1, f"Release R2-{i} fixes bug BUG-7 too")
            for i in range(MAX_PINNED + 1)]
    assert [h.chunk.id for h in fuse_hits(many, many[::-1], top_k=9, question="BUG-7?")] == \
        [h.chunk.id for h in fuse_hits(many, many[::-1], top_k=9)]
    one = fuse_hits(many, many[::-1], top_k=9, question="what is in R2-2?")
    assert one[0].chunk.id == "c2"
