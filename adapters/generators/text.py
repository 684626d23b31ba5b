"""Vocabulary and templates for generated LongMemEval-S-shaped haystacks.

Facts are stated in evidence turns in other words than the question asks
them; the same templates, filled with other values, appear in filler
sessions as near-miss distractors. That is what keeps dense and lexical
retrieval from agreeing, and keeps both below a perfect score.
"""

NAMES = [
    "Biscuit", "Juniper", "Marlowe", "Pepper", "Odessa", "Tobias", "Wren", "Casimir", "Luna", "Rufus",
    "Clementine", "Atlas", "Mabel", "Ziggy", "Hazel", "Otis", "Saffron", "Bramble", "Indigo", "Pippin",
]
CITIES = [
    "Lisbon", "Montreal", "Osaka", "Valparaiso", "Tallinn", "Porto", "Kraków", "Hobart", "Ljubljana", "Cusco",
    "Bergen", "Tbilisi", "Oaxaca", "Ghent", "Da Nang", "Zanzibar", "Reykjavik", "Seville", "Kyoto", "Tromsø",
]
THINGS = [
    "a cast-iron skillet", "a mechanical keyboard", "noise-cancelling headphones", "a standing desk",
    "a sourdough starter kit", "a road bike", "an espresso grinder", "a telescope", "a sewing machine",
    "hiking boots", "a drone", "a ukulele", "a robot vacuum", "a kayak", "an e-reader", "a pottery wheel",
]
COLORS = ["teal", "burgundy", "mustard yellow", "sage green", "charcoal", "coral", "navy", "lavender", "ochre"]
HOBBIES = [
    "bouldering", "watercolour painting", "salsa dancing", "birdwatching", "woodworking", "fencing",
    "beekeeping", "calligraphy", "sailing", "chess", "archery", "improv theatre", "rock climbing",
]
CUISINES = ["Ethiopian", "Peruvian", "Georgian", "Sichuan", "Lebanese", "Basque", "Korean", "Oaxacan", "Sri Lankan"]
INSTRUMENTS = ["cello", "banjo", "clarinet", "harp", "saxophone", "mandolin", "oboe", "accordion", "tabla"]
COMPANIES = ["Northwind", "Bluepeak", "Quillon", "Ardent Labs", "Fernbrook", "Tessellate", "Halcyon", "Marrow & Co"]
SUBJECTS = ["marine biology", "medieval history", "data journalism", "urban planning", "astrophysics", "linguistics"]

#: Each fact: how the question asks it, how a user (or assistant) states it,
#: how a near-miss distractor mentions the same kind of thing, and its values.
FACTS = [
    {"key": "pet", "lexical": "Our new dog has settled in nicely; after a long family debate his name is {value}.", "values": NAMES,
     "question": "What is the name of my dog?",
     "evidence": "We finally brought the little rescue home from the shelter on Saturday and the kids decided to call him {value}. He already chewed a slipper.",
     "assistant": "Since your new puppy is called {value}, a short two-syllable recall word works well for training.",
     "distractor": "My neighbour's dog is a grumpy old terrier whose name is {value}, and he barks at every delivery van."},
    {"key": "move", "lexical": "My sister told me which city she is moving to: {value}, for the new job.", "values": CITIES,
     "question": "Which city is my sister moving to?",
     "evidence": "Big family news: Clara accepted the job offer, so she is packing up her flat and relocating to {value} next month.",
     "assistant": "For your sister's relocation to {value}, I would book movers at least six weeks ahead.",
     "distractor": "A colleague of mine is moving to {value} and keeps asking which neighbourhoods are quiet for a city flat."},
    {"key": "purchase", "lexical": "The birthday money went on {value} in the end, and I do not regret it.", "values": THINGS,
     "question": "What did I buy with my birthday money?",
     "evidence": "I treated myself after the party: the gift cards from my aunts all went towards {value}, which I had wanted for ages.",
     "assistant": "Good choice spending the birthday gift cards on {value}; check whether the warranty needs registering.",
     "distractor": "I saw an advert for {value} on sale and wondered whether it would make a good birthday present for my dad."},
    {"key": "car_color", "lexical": "The new car is {value}, which my partner thinks is a questionable colour.", "values": COLORS,
     "question": "What colour is my new car?",
     "evidence": "Picked up the hatchback from the dealer today. I went with the {value} paint even though the salesman pushed silver.",
     "assistant": "A {value} hatchback should hide road dust better than black or white ones.",
     "distractor": "The car next to mine at the garage was painted {value}, which is a bold colour for a minivan."},
    {"key": "hobby", "lexical": "My new hobby this year is {value}, and it has completely taken over my weekends.", "values": HOBBIES,
     "question": "What new hobby did I take up this year?",
     "evidence": "Since January I have been going to a weekly {value} class at the community centre and I am hooked.",
     "assistant": "Starting {value} as a beginner, you'll progress faster with two short sessions a week than one long one.",
     "distractor": "My cousin tried {value} as a new year's hobby but gave it up by February."},
    {"key": "restaurant", "lexical": "For the anniversary we went to a {value} restaurant and ordered far too much food.", "values": CUISINES,
     "question": "What kind of food did I have at the restaurant for our anniversary?",
     "evidence": "For our tenth year together we booked the little {value} place downtown; the tasting menu was unforgettable.",
     "assistant": "{value} cooking for an anniversary dinner sounds lovely; the tasting menu is usually the best value.",
     "distractor": "There is a new {value} restaurant near the office that everyone recommends for a celebration dinner."},
    {"key": "instrument", "lexical": "Learning to play the {value} is harder than I expected, but I practise daily.", "values": INSTRUMENTS,
     "question": "Which musical instrument am I learning to play?",
     "evidence": "My fingers hurt after practising scales on the {value} for an hour, but my teacher says the sore phase passes.",
     "assistant": "Sore fingers are normal for the first weeks on the {value}; keep sessions to twenty minutes.",
     "distractor": "The school concert had a student playing the {value}, and the whole audience went silent."},
    {"key": "employer", "lexical": "I now work at {value}, so my commute and my whole routine have changed.", "values": COMPANIES,
     "question": "Where do I work now?",
     "evidence": "First week at {value} done! The onboarding was chaotic but the team seems great and my commute is shorter.",
     "assistant": "Congratulations on joining {value}; a thirty-sixty-ninety day plan helps in a new role.",
     "distractor": "A recruiter from {value} emailed me about an opening, but I have not replied yet."},
    {"key": "course", "lexical": "The evening course I signed up for is about {value}, and the first lecture was great.", "values": SUBJECTS,
     "question": "What subject is my evening course about?",
     "evidence": "Tuesday nights are now reserved for the extension programme: I enrolled in an introduction to {value}.",
     "assistant": "For an introductory {value} course, reading the syllabus before week one pays off.",
     "distractor": "A friend suggested an evening course in {value}, but I doubt I have the time."},
    {"key": "run", "lexical": "In the charity race I managed to run {value} km without stopping once.", "values": list(range(3, 43, 3)),
     "question": "How many kilometres did I run in the charity race?",
     "evidence": "Crossed the finish line exhausted but proud: {value} km for the children's hospital fundraiser.",
     "assistant": "Running {value} km for charity is a real achievement; rest and hydrate well this week.",
     "distractor": "The charity race this spring offers a {value} km route and a shorter fun run."},
    {"key": "books", "lexical": "I have read {value} books so far this year, mostly crime novels.", "values": list(range(2, 30)),
     "question": "How many books have I read this year?",
     "evidence": "I just finished another novel, which brings my reading log for the year to {value}.",
     "assistant": "{value} books by this point in the year puts you well ahead of your reading goal.",
     "distractor": "Our book club set a target of {value} books this year but most members fell behind."},
    {"key": "plants", "lexical": "I now have {value} houseplants, which is probably too many for this flat.", "values": list(range(2, 20)),
     "question": "How many houseplants do I have?",
     "evidence": "Counted the greenery on the windowsills this morning: {value} pots, counting the new fern.",
     "assistant": "With {value} plants indoors, grouping them by light needs will simplify watering.",
     "distractor": "The garden centre sells a bundle of {value} houseplants for beginners."},
]

PREFERENCES = [
    ("Can you suggest something to cook for dinner this weekend?",
     "Honestly I avoid anything with meat these days; I have been fully plant-based since spring and love spicy food.",
     "The user prefers spicy, plant-based (vegan) recipes."),
    ("Any recommendations for a podcast for my commute?",
     "I get bored by chatty shows, what I enjoy is deep investigative journalism with a proper narrative arc.",
     "The user prefers narrative investigative journalism podcasts."),
    ("What should I do on my trip next month?",
     "On holidays I skip museums and tours; give me a remote trail, a tent and no crowds.",
     "The user prefers remote outdoor hiking and camping over sightseeing."),
    ("Could you recommend a laptop for me?",
     "I edit 4K video on the go, so battery life and a colour-accurate screen matter more to me than weight.",
     "The user needs a laptop for video editing with long battery and an accurate display."),
]

#: How a third person says nearly the same thing: the hardest near-miss for dense retrieval.
HEARSAY = ["My cousin mentioned something similar:", "A friend from work told me this about herself:",
           "Funny, my neighbour said almost the same thing:", "I read a post online where someone wrote:"]

FILLER_TOPICS = {
    "cooking": "braise simmer marinade saucepan oven garlic shallots stock reduction caramelise knead dough yeast",
    "travel": "itinerary layover passport visa hostel backpack train ferry luggage booking sightseeing currency",
    "programming": "function variable compiler runtime exception refactor repository commit branch deploy latency cache",
    "fitness": "squat deadlift cardio stretching protein recovery interval treadmill hydration mobility endurance",
    "finance": "budget mortgage interest savings index fund inflation pension invoice tax deduction portfolio",
    "gardening": "compost mulch seedlings pruning soil fertiliser greenhouse perennials aphids irrigation trellis",
    "history": "empire dynasty treaty revolution archive manuscript medieval colonial monarchy parliament siege",
    "music": "chord melody rhythm tempo harmony rehearsal scale improvisation metronome concert orchestra",
    "parenting": "toddler bedtime tantrum daycare homework routine screen time allowance teenager pediatrician",
    "science": "hypothesis experiment molecule photosynthesis gravity quantum enzyme telescope genome climate",
}

USER_OPENERS = [
    "I have a question about {topic}.", "Can you help me with some {topic} stuff?",
    "Quick one about {topic}:", "I was reading about {topic} last night.", "Something about {topic} confuses me.",
]
ASSISTANT_OPENERS = [
    "Great question! Here is an overview of {topic}.", "Sure, let's go through the {topic} basics step by step.",
    "Happy to help. There are a few things to keep in mind about {topic}.",
]
SENTENCE_FORMS = [
    "When it comes to {a}, most people underestimate how much {b} matters.",
    "A common mistake is to focus on {a} before you have sorted out {b}.",
    "You can think of {a} and {b} as two sides of the same problem.",
    "If {a} is the goal, then {b} is usually the first practical step.",
    "Experts disagree about {a}, but nearly all of them agree that {b} deserves attention.",
    "In practice, {a} tends to go wrong when {b} is ignored for too long.",
    "It may help to write down what you know about {a} and what you still need about {b}.",
    "There is no single right answer for {a}; it depends on your situation and on {b}.",
]
