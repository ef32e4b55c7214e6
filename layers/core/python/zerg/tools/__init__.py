"""The tools agents call: each module one tool or one family, built on the tool seam
(:mod:`zerg.loop.tool`); :mod:`zerg.tools.catalog` says which agent gets which."""
