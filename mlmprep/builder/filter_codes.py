"""The codes the quality-filter kernels (mlmprep.builder._filter_kernels) return and read, shared with
mlmprep.builder.filters, which loads the kernels on first use (a build's driver never loads Numba)."""

SPACE, DIGIT, ALPHA, SYMBOL = 1, 2, 4, 8

# C4: a line's fate (line_fate), then a page's (page_fate)
LINE_KEPT, LINE_LONG_WORD, LINE_NO_END_MARK, LINE_SHORT, LINE_JAVASCRIPT, LINE_POLICY, LINE_STOP, LINE_UNSEEN = range(8)
PAGE_KEPT, PAGE_TOO_LONG, PAGE_LOREM_IPSUM, PAGE_CURLY_BRACKET, PAGE_FEW_SENTENCES = range(5)

# Gopher: a document's fate, the first rule it fails in this order (0: kept)
(Q_KEPT, Q_FEW_WORDS, Q_MANY_WORDS, Q_SHORT_WORDS, Q_LONG_WORDS, Q_HASHES, Q_ELLIPSES, Q_BULLET_LINES,
 Q_ELLIPSIS_LINES, Q_FEW_ALPHA_WORDS, Q_FEW_STOP_WORDS) = range(11)
R_KEPT, R_DUP_PARAGRAPHS, R_DUP_PARAGRAPH_CHARS, R_DUP_LINES, R_DUP_LINE_CHARS, R_TOP_NGRAM, R_DUP_NGRAM = range(7)
