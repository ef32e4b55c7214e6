"""Your data, yours: an owner's whole data as one archive (:mod:`.export`) and its deletion
(:mod:`.delete`); :mod:`.scope` says what that data is."""
