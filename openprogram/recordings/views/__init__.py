"""What a person reads of a recording: the summaries of ``list`` and ``show``, the comparison of
``diff``, the conversation walk and the HTML view. See ``docs/recordings-cli.md``."""
